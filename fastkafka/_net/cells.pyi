def monotonic_ms() -> int: ...

class VersionCell:
    value: int

class DueCell:
    at_ms: int
