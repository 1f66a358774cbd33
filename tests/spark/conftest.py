"""The Spark tests use the session's one SparkSession, the fixture ``spark`` of tests/conftest.py
(master ``local[2,4]``: two cores, and a failed task is retried up to 4 times, as on a cluster),
which the documentation's Spark examples (tests/docs) share."""
