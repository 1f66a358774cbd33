class ProduceRequestBuilder:
    min_version: int
