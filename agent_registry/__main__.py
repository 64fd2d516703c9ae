from .cli.fast import run

run()
