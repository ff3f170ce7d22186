"""Child agents on a Ray cluster (extra ``ray``): ``tn.RayProvider``. Importing this package does not
import or start Ray; a provider connects on first use."""

from .provider import RayProvider

__all__ = ["RayProvider"]
