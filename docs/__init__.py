"""The project's documentation; ``docs.gen`` writes the reference pages from the code."""
