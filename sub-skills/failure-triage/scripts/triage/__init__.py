"""The failure-triage engine behind scripts/triage_log.py (the CLI).

Modules, each importing only those listed before it:
  clean    - one physical line -> text without ANSI codes and rank/host prefixes, rank, timestamp
  grammar  - failure classes independent of the catalog: which lines state a failure, root or
             cascade, and a class-level cause and fix
  catalog  - the YAML signature catalog (loaded through a compiled JSON cache), match order,
             --explain / --search
  engine   - the streaming analysis: tracebacks, multi-line messages, candidates, timestamps,
             several files
  reader   - the bounded readers: byte blocks, the prefilter's skip in C
Standard library + PyYAML only; never imports torch, accelerate or deepspeed.
"""
