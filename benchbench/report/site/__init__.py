"""``benchbench leaderboard``: the generated leaderboards (Markdown, LaTeX, a static HTML site with plots)
built from stored result records alone, deterministically, plus the staleness check CI runs.

Why deterministic: CI rebuilds the leaderboard from the committed records and fails when the committed
files differ, so a stale leaderboard never lands. Nothing here reads the clock, the environment or the
file system order: rows and files are sorted, plots are matplotlib SVGs with a fixed hash salt and no
date (matplotlib because it is already the plotting library people know, renders at build time and needs
no JavaScript or CDN; the page works from ``file://``).

One module a job: ``tables`` (records -> rows, suite tables, studies, provenance), ``markdown``,
``latex``, ``plots`` and ``html`` (formats only; escaping is ``report.escaping``'s), ``folder`` (the
folder: the manifest of what it owns, symlink refusal, the atomic site swap, the lock, ``check``).
Generated files: ``README.md``, ``latex/``, ``site/`` (``site/screenshot.png`` by ``--screenshot``) and
the manifest ``.benchbench-manifest.json``; other files in the folder are never touched.
"""

from benchbench.report.aggregate import row_label as row_label
from benchbench.report.escaping import escape_latex as escape_latex
from benchbench.report.site.folder import (
    DAMAGED as DAMAGED,
)
from benchbench.report.site.folder import (
    GENERATED as GENERATED,
)
from benchbench.report.site.folder import (
    MANIFEST as MANIFEST,
)
from benchbench.report.site.folder import (
    SHOT as SHOT,
)
from benchbench.report.site.folder import (
    ForeignFileError as ForeignFileError,
)
from benchbench.report.site.folder import (
    build as build,
)
from benchbench.report.site.folder import (
    check as check,
)
from benchbench.report.site.folder import (
    render_files as render_files,
)
from benchbench.report.site.folder import (
    screenshot as screenshot,
)
from benchbench.report.site.html import render_site as render_site
from benchbench.report.site.latex import render_latex as render_latex
from benchbench.report.site.markdown import render_markdown as render_markdown
from benchbench.report.site.plots import make_plots as make_plots
from benchbench.report.site.tables import (
    SPLIT as SPLIT,
)
from benchbench.report.site.tables import (
    SUITES as SUITES,
)
from benchbench.report.site.tables import (
    StudySection as StudySection,
)
from benchbench.report.site.tables import (
    Table as Table,
)
from benchbench.report.site.tables import (
    build_rows as build_rows,
)
from benchbench.report.site.tables import (
    load_records as load_records,
)
from benchbench.report.site.tables import (
    provenance_line as provenance_line,
)
from benchbench.report.site.tables import (
    study_sections as study_sections,
)
from benchbench.report.site.tables import (
    suite_tables as suite_tables,
)
