"""The store: the only code that runs git (one environment policy, one config reader,
the flock's errors), the machine's processes, and the files shipped with the package."""
