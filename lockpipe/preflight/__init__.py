"""Preflight: does a target's serving shape fit its card, before anything is started?

Pure planning from the lock, model metadata (a GGUF header or a Hugging Face
``config.json``) and the pinned runtimes' own rules, read from their source trees:

- :mod:`.shape`: the attention layers of a model (sliding or full, KV heads, head dims).
- :mod:`.llama`: llama.cpp b10069's KV bytes, slot grid and flash-attention kernel rule;
  :mod:`.recurrent` and :mod:`.plan_hybrid` the Gated DeltaNet hybrids' state and MTP
  context; :mod:`.llama_cuda` what the CUDA backend allocates beyond the KV (flash
  attention's f16 copies, the extra contexts' masks); :mod:`.llama_budget` the budget
  inequality and the fixes that fit.
- :mod:`.vllm_kv`: vLLM 0.29.0's KV pages, their unification and padding, the token pool.
- :mod:`.vllm_rules`: what the pinned vLLM rejects (dtypes, backends, env vars, fp8 on sm<89);
  :mod:`.vllm_args` and :mod:`.llama_args` read the serve command lines.
- :mod:`.host`: known cards, the driver a CUDA version needs, the card's architecture.
- :mod:`.config`: ``locks/preflight.json``: measured calibrations and model shapes.
- :mod:`.plan`: one target in, one :class:`.verdict.TargetReport` out, under the
  command line's what-ifs (:mod:`.whatif`).

Two functions run a program, through ``lockpipe.cmd``: :func:`.host.nvidia_smi`
(``nvidia-smi``) and :func:`.vllm_parser.parse`, vLLM's own serve-argument parser from the
pinned wheel in a CPU-only Python (:mod:`.vllm_parse_child`; :mod:`.vllm_parser_env` builds
that Python, ``nox -s vllm-parser``).
"""
