"""The database: its shape (schema.py), records turned into rows (load.py), the process that writes them
(writer.py), opening files (connection.py), and the commands that read a finished database (check.py,
export.py)."""
