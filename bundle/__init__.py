"""Session bundles (issue 13): a session exported as one signed zip that proves itself, verified before
anything is imported, imported under a new local id; and a readable Markdown export. docs/FORMAT.md §21. On either backend: `stores=` (storage.stores), docs/BACKENDS.md."""

from bundle.export import Exported, export_session
from bundle.format import BUNDLE_FORMAT, BundleError
from bundle.importer import (
    Imported,
    ImportRefused,
    Origin,
    import_bundle,
    imported_dir,
    list_imported,
    trusted_keys,
    verify_imported_receipt,
)
from bundle.markdown import render_markdown, write_markdown
from bundle.verify import BundleReport, verify_file

__all__ = [
    "BUNDLE_FORMAT",
    "BundleError",
    "BundleReport",
    "Exported",
    "ImportRefused",
    "Imported",
    "Origin",
    "export_session",
    "import_bundle",
    "imported_dir",
    "list_imported",
    "render_markdown",
    "trusted_keys",
    "verify_file",
    "verify_imported_receipt",
    "write_markdown",
]
