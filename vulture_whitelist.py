"""Names vulture reports as unused (``vulture benchbench plugins vulture_whitelist.py --min-confidence 60``,
run in .ci/run), each used where vulture cannot see it. vulture only parses this file: one line a
name, with the reason. It is never imported."""
# ruff: noqa

_.__getattr__  # benchbench/__init__.py: PEP 562 lazy public API, and the moved-module alias
_.__dir__  # PEP 562
_.create_module  # importlib loader protocol (_MovedFinder)
_.suggestions  # UnknownNameError: read by callers that offer did-you-mean
benchbench_register_methods  # pluggy hookspecs and hookimpls: called by name through pm.hook
benchbench_register_tasks
benchbench_register_adapters
benchbench_register_augmenters
benchbench_register_taggers
benchbench_register_loaders
benchbench_register_commands
reset_registry  # tests and embedding applications drop the cached registry
_.citation  # TaskSpec field, kept in the spec and shown by `list`
PairScorer  # public protocols: benchbench.PairScorer, benchbench.Searcher
Searcher
hub  # SPLIT_ZIP_MODELS tuple unpacking names the hub id beside the parts it is rebuilt from
accuracy  # the public `benchbench.metrics` module for task authors
f1
senteval_sequential_fit  # SentEval's reference protocol, compared with the fast one in tests and bench
AFSAdapter  # adapters: registered by kind through benchbench_register_adapters
AnalogyAdapter
AskUbuntuAdapter
CaptionRetrievalAdapter
CQADupStackAdapter
PairClassificationAdapter
SciDocsAdapter
SentEvalAdapter
SICKRelatednessAdapter
STSAdapter
HFSTSAdapter  # evaluate/adapters/hf.py: registered by kind like the others
HFPairsAdapter
HFRetrievalAdapter
_.mteb_model_meta  # evaluate/mteb_encoder.py: read by mteb (its EncoderProtocol)
from_name  # evaluate/mteb_encoder.py: the documented way to hand a saved folder to mteb
TwitterParaAdapter
_.significant  # SeedTest: read by tests and by report text
paired_bootstrap  # used by report.significance and tests
open_text  # readers in task plugins open gz or plain text through it
__new__  # Setup: a str subclass
_.misses  # ViewCache hit/miss accounting, read by benches
_.uses_labels  # augmenters: read through getattr by plugins/bsl.py
load_flow  # registered loaders (benchbench_register_loaders)
tiny_decoder  # public API (benchbench.tiny_decoder, lazy export): random tiny Llama/Qwen2 encoders for tests
_.normalizer  # encode/decoder.py tiny_tokenizer: a tokenizers.Tokenizer's pipeline, read by the library
_.pre_tokenizer
_.post_processor
reload
encoder_attention_mask  # tsdae: the HF cross-attention forward signature
_.is_decoder  # tsdae: HF config flags set on the decoder
_.add_cross_attention
_.use_cache
register_encoder_loader  # deprecated public name kept for 0.1 plugins
_.domain  # TaskSpec.domain: read by the report layer and tests (benchbench.encode.cards)
_.hub_id  # ModelCard fields: data of the base-model cards, read by reports and tests
_.revision
model_card  # encode.models: card lookup for a --model name, public for reports and tests
flags_for  # report.contamination: the study view's per-cell contamination flags, and bench/contamination_table.py
corpus_ref  # report.contamination: a record's train.corpus as a CorpusRef, for the study view and the bench
tie_column  # report.study_view: one column's tie group, for tests and callers without a study
p_raw  # report.study_view.Column: the unadjusted p-values beside the Holm-adjusted ones (cached, tested)
at_start  # report.study_view.ShownCell: the ≈ flag for renderers
builtin_files  # run.study: the built-in study files' bytes, for the version test
cell_verdict  # report.learning: a study cell's verdict over its seeds, for the study view (issue 37; tests)
curves_figure  # report.plots_curves: a study column's curves, for the site (issue 37; tests)
_.num_hidden_layers  # plugins/infocse.py: the frozen copy's config states its cut layer count, as the reference's config_mlm (a transformers config field; tests read it)
