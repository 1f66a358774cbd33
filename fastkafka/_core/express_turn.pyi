from fastkafka._core.network import NetworkClient

class ExpressTurn:
    turns_sent: int
    answers_read: int

def _hold_gil_for_test(client: NetworkClient, ms: int) -> int: ...
