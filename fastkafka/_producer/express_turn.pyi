class ExpressTurn:
    turns_sent: int
    answers_read: int
