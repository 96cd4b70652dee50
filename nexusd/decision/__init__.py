"""The decision layer: the pipeline's one order (``pipeline.py``) and the pool its facts run in (``pool.py``)."""
