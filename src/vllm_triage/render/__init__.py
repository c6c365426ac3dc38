"""Output formats: rich text for people at a terminal, markdown for tickets, JSON for scripts."""
