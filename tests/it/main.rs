//! The integration tests, as one binary: each module is one area of the public API (the crate is
//! linked and the embedded vocabulary loaded once, instead of once per file). Shared helpers live
//! in [`common`]; data-driven cases in `tests/data/`.

mod common;

mod architecture;

mod cfg_errors;
mod cfg_generate;
mod cfg_lexer;
mod cfg_oracle;
mod cfg_positions;
mod cfg_tokens;
mod cli;
mod decode_loop;
mod decode_think;
mod decode_think_schema;
mod decode_tools;
mod engine_errors;
mod fuzz_gen;
mod fuzz_regressions;
mod gpu_mlx;
mod grammar_cases;
mod hardening;
mod json_cases;
mod json_props;
mod json_schema_suite;
mod maskbench_sample;
mod model;
mod regex_lazy;
mod regex_oracle;
mod sampler_alloc;
mod sampler_api;
mod sampler_fidelity;
mod sampler_mlx_golden;
mod sampler_paths;
mod sampler_props;
mod sampler_rejection;
mod sampler_stats;
mod sampler_topk;
mod schema_closed;
mod schema_errors;
mod schema_fast_masks;
mod schema_forced;
mod schema_fuzz;
mod schema_maskbench;
mod schema_spelling;
mod schema_unique;
mod schema_walk;
mod step_mask_views;
mod tagged;
mod vocab;
mod vocab_cache;
mod vocab_encoder;
