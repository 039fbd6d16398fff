"""Questions asked of a finished database that the terminal (cli.py) and the web (web/) both ask: the same
parameters, the same SQL, the same answers."""
