"""Reading: one reader per kind of input (pages.py: cache.spack.io pages; indexes.py: Spack's build-cache
indexes), each turning documents into the records of records.py. inputs.py sorts the command line's
arguments, locations.py says where a document may send us, files.py and fetch.py get bytes safely,
index_tags.py decides which tags' indexes changed."""
