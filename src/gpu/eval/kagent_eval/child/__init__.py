"""What runs in the forked processes beside candidate code: it produces data and judges nothing."""
