"""Use cases. Each public function is one use case; it flushes, and the caller (view, task or
CLI command) commits once at its boundary."""
