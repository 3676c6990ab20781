"""Program analysis: what a name's value may be at a given read (``flow``)."""
