"""What every floor reads: the wire format, digests, inputs, loading, defaults, timing primitives."""
