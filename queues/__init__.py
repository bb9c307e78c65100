"""Queue types and their storage: the classic-queue message store lives here."""
