from .hotpath import run

run()
