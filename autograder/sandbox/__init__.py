"""The sandbox: kernels in bubblewrap, forked from a warm Python, limited as a whole."""
