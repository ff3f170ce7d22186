"""The package's version, in a module of its own so that any layer can name it without importing the
package's front door (``toh_nb/__init__.py`` re-exports it; pyproject.toml carries the same string)."""

__version__ = "0.1.0"
