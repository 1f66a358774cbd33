class GilFreeTurn:
    turns_sent: int
    answers_read: int
