"""The branch format: every path on the registry branch, the record formats, when a
record stops counting, the view of one tree, and the rendered registry.md."""
