"""Layer 7: everything that reads stored records: aggregation, tables, the static site and
plots, significance, ``reproduce``, MTEB interchange. Imports the layers below it."""
