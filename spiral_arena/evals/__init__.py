"""Reasoning-transfer evaluation: does game self-play make a model better at maths and science questions?

``spiral-arena eval`` runs the eight benchmarks SPIRAL reports (six maths sets, GPQA-Diamond and
MMLU-Pro) through the trainer's own generation engines or any OpenAI-compatible endpoint, under a
named protocol preset, and writes ``samples.jsonl``, ``results.json`` and ``manifest.json``. Data is
read from local files first; nothing here downloads anything unless the optional ``datasets``
package is installed and the machine is online.
"""
