"""Adapters for the frameworks that call a constraint backend: ``transformers``
(``LogitsProcessor``), ``mlx_lm`` (``logits_processor``) and ``vllm`` (a backend with the method
set of vLLM's structured-output backend). Each imports its framework lazily, so importing
``grammask`` never needs torch, mlx or vLLM."""
