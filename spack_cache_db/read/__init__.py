"""Reading: one reader per kind of input (pages.py: cache.spack.io pages; indexes.py: Spack's build-cache
indexes), each turning documents into the records of records.py. inputs.py sorts the command line's
arguments, files.py and fetch.py get bytes safely, index_tags.py decides which tags' indexes changed."""
