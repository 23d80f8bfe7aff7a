"""The engine: which notebooks to grade, where (local workers, Dask), what is cached."""
