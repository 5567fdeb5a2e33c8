"""A LeRobot-shaped episode dataset built locally, and two ways to serve it.

The dataset mimics what LeRobot stores for an image-based robot dataset: one
Hugging Face ``datasets`` row per frame, Arrow-backed and memory-mapped from
disk, with

* ``observation.image.top`` and ``observation.image.wrist``: two camera
  frames, JPEG bytes behind a ``datasets.Image()`` feature, so reading a row
  decodes both into PIL images;
* ``observation.state`` and ``action``: float32 vectors of ``state_dim``
  joint positions (the action is the next frame's target position);
* ``episode_index``, ``frame_index`` (int64) and ``timestamp`` (float32, s).

Nothing is downloaded: the frames are synthesised from a seed (smooth
gradients, moving blobs and sensor noise, so that decoding costs real CPU).

:class:`HistoricalDeltaDataset` and :class:`FixedDeltaDataset` are two torch
``Dataset`` views of the same rows that return the same tensors; they differ
only in how they read the frames around a sample (LeRobot's
``delta_timestamps``), which is the regression the demo reproduces.
"""

from __future__ import annotations

import io
import json
import os
import shutil
from typing import Callable, Mapping, Optional, Sequence

import numpy as np
import torch
from torch.utils.data import Dataset

FPS = 50  # frames per second, as ALOHA records
STATE_DIM = 14  # a bimanual arm: 2 x (6 joints + gripper), as in ALOHA
CAMERAS = ("observation.image.top", "observation.image.wrist")
JPEG_QUALITY = 90
# Bump when the content or layout of the built dataset changes, so that a
# cache built by an older version is rebuilt instead of reused.
FORMAT_VERSION = 1
META_FILE = "traceml_demo.json"

# An ACT-style request: a chunk of the next 50 actions (1 s at 50 fps; ACT's
# default chunk is 100).  Offsets in seconds, as LeRobot's delta_timestamps.
CHUNK = 50
DEFAULT_DELTA_TIMESTAMPS = {"action": [k / FPS for k in range(CHUNK)]}


# --- building -----------------------------------------------------------------


def _features(state_dim: int):
    import datasets

    vector = datasets.Sequence(datasets.Value("float32"), length=state_dim)
    return datasets.Features(
        {
            CAMERAS[0]: datasets.Image(),
            CAMERAS[1]: datasets.Image(),
            "observation.state": vector,
            "action": vector,
            "episode_index": datasets.Value("int64"),
            "frame_index": datasets.Value("int64"),
            "timestamp": datasets.Value("float32"),
        }
    )


class _Camera:
    """One camera of one episode: a lit background and three coloured
    objects drifting on smooth paths, plus sensor noise."""

    NOISE_SIGMA = 8.0  # grey levels
    NOISE_MARGIN = 32  # pixels: the noise bank is this much larger than a frame

    def __init__(self, rng: np.random.Generator, h: int, w: int):
        self.rng = rng
        self.h, self.w = h, w
        y = np.linspace(0.0, 1.0, h, dtype=np.float32)[:, None]
        x = np.linspace(0.0, 1.0, w, dtype=np.float32)[None, :]
        top, bottom = rng.uniform(40, 220, size=(2, 3)).astype(np.float32)
        # (h, w, 3) background: vertical colour gradient, soft side shading.
        shade = 1.0 - 0.25 * (x - 0.5) ** 2
        self.background = (top + (bottom - top) * y[..., None]) * shade[..., None]
        self.colors = rng.uniform(0, 255, size=(3, 3)).astype(np.float32)
        self.centers = rng.uniform(0.2, 0.8, size=(3, 2))
        self.amplitude = rng.uniform(0.05, 0.25, size=(3, 2))
        self.freq = rng.uniform(0.05, 0.3, size=(3, 2))  # cycles per second
        self.phase = rng.uniform(0, 2 * np.pi, size=(3, 2))
        self.radius = rng.uniform(0.06, 0.15, size=3)  # share of the frame
        # Sensor noise: each frame takes a random crop of one larger field,
        # as cheap as fresh noise to the eye and to the JPEG coder.
        m = self.NOISE_MARGIN
        self.noise = self.NOISE_SIGMA * rng.standard_normal(
            (h + m, w + m, 3), dtype=np.float32
        )

    def frame(self, t: float) -> np.ndarray:
        """The (h, w, 3) uint8 image at time ``t`` seconds."""
        h, w, m = self.h, self.w, self.NOISE_MARGIN
        oy, ox = self.rng.integers(0, m + 1, size=2)
        img = self.background + self.noise[oy : oy + h, ox : ox + w]
        pos = self.centers + self.amplitude * np.sin(
            2 * np.pi * self.freq * t + self.phase
        )
        for (cy, cx), r, color in zip(pos, self.radius, self.colors):
            # A Gaussian blob, drawn only within 3 radii of its centre (it
            # has faded below 1e-4 there); coordinates in pixels.
            cy, cx, ry, rx = cy * h, cx * w, r * h, r * w
            y0, y1 = max(int(cy - 3 * ry), 0), min(int(cy + 3 * ry) + 1, h)
            x0, x1 = max(int(cx - 3 * rx), 0), min(int(cx + 3 * rx) + 1, w)
            if y0 >= y1 or x0 >= x1:
                continue
            gy = np.exp(-(((np.arange(y0, y1, dtype=np.float32) - cy) / ry) ** 2))
            gx = np.exp(-(((np.arange(x0, x1, dtype=np.float32) - cx) / rx) ** 2))
            alpha = np.outer(gy, gx)[..., None]
            box = img[y0:y1, x0:x1]
            box += alpha * (color - box)
        return np.clip(img, 0, 255).astype(np.uint8)


def _jpeg(image: np.ndarray) -> bytes:
    from PIL import Image

    buf = io.BytesIO()
    Image.fromarray(image).save(buf, format="JPEG", quality=JPEG_QUALITY)
    return buf.getvalue()


def _episode(
    seed: int, episode: int, frames: int, image_hw: tuple[int, int], state_dim: int
) -> dict:
    """The columns of one episode (lists of length ``frames``)."""
    rng = np.random.default_rng([seed, episode])
    h, w = image_hw
    cams = [_Camera(rng, h, w) for _ in CAMERAS]
    t = np.arange(frames + 1) / FPS  # one extra frame: the last action's target
    # Joint positions (rad): a slow sum of two sines per joint.
    amp = rng.uniform(0.1, 0.8, size=(2, state_dim))
    freq = rng.uniform(0.05, 0.5, size=(2, state_dim))
    phase = rng.uniform(0, 2 * np.pi, size=(2, state_dim))
    # q: (frames + 1, state_dim)
    angle = 2 * np.pi * freq[:, None] * t[None, :, None] + phase[:, None]
    q = (amp[:, None] * np.sin(angle)).sum(0)
    state = q[:-1].astype(np.float32)
    action = (q[1:] + rng.normal(0, 0.01, size=q[1:].shape)).astype(np.float32)
    cols = {name: [] for name in CAMERAS}
    for f in range(frames):
        for name, cam in zip(CAMERAS, cams):
            cols[name].append({"bytes": _jpeg(cam.frame(t[f])), "path": None})
    cols["observation.state"] = list(state)
    cols["action"] = list(action)
    cols["episode_index"] = [episode] * frames
    cols["frame_index"] = list(range(frames))
    cols["timestamp"] = list(t[:frames].astype(np.float32))
    return cols


def build_dataset(
    root: str,
    *,
    episodes: int = 10,
    frames_per_episode: int = 120,
    image_hw: tuple[int, int] = (240, 320),
    seed: int = 0,
    state_dim: int = STATE_DIM,
    log: Optional[Callable[[str], None]] = None,
):
    """Build (or reuse) the LeRobot-shaped dataset under ``root``.

    Args:
        root: a directory; the dataset goes into a subdirectory named after
            the parameters, so different sizes live side by side.  An
            existing build with the same parameters is loaded, not rebuilt.
        episodes: number of episodes.
        frames_per_episode: frames (rows) per episode, at ``FPS`` frames/s.
        image_hw: (height, width) of each camera image, pixels.
        seed: every pixel and joint value follows from it.
        state_dim: length of the ``observation.state`` and ``action`` vectors.
        log: called with one progress line when building (not when reusing).

    Returns:
        A ``datasets.Dataset`` of ``episodes * frames_per_episode`` rows,
        memory-mapped from disk (``load_from_disk``), in episode order.
    """
    import datasets

    h, w = (int(v) for v in image_hw)
    params = {
        "format_version": FORMAT_VERSION,
        "episodes": int(episodes),
        "frames_per_episode": int(frames_per_episode),
        "image_hw": [h, w],
        "seed": int(seed),
        "state_dim": int(state_dim),
        "fps": FPS,
        "jpeg_quality": JPEG_QUALITY,
    }
    name = (
        f"lerobot-e{episodes}-f{frames_per_episode}-{h}x{w}-d{state_dim}"
        f"-s{seed}-v{FORMAT_VERSION}"
    )
    path = os.path.join(os.path.expanduser(root), name)
    meta_path = os.path.join(path, META_FILE)
    if os.path.exists(meta_path):
        try:
            with open(meta_path) as f:
                if json.load(f) == params:
                    return datasets.load_from_disk(path)
        except (OSError, ValueError):
            pass  # unreadable or stale: rebuild below
        shutil.rmtree(path, ignore_errors=True)

    if log:
        log(
            f"building dataset: {episodes} episodes x {frames_per_episode} "
            f"frames, 2 cameras {h}x{w} JPEG -> {path}"
        )
    features = _features(state_dim)
    columns = {name: [] for name in features}
    for e in range(episodes):
        episode = _episode(seed, e, frames_per_episode, (h, w), state_dim)
        for key, values in episode.items():
            columns[key].extend(values)
    ds = datasets.Dataset.from_dict(columns, features=features)

    # Write to a private directory, then move it into place, so that an
    # interrupted build never leaves a half-written dataset that looks done.
    os.makedirs(os.path.dirname(path), exist_ok=True)
    tmp = f"{path}.tmp-{os.getpid()}"
    shutil.rmtree(tmp, ignore_errors=True)
    bars = datasets.is_progress_bar_enabled()
    datasets.disable_progress_bars()
    try:
        ds.save_to_disk(tmp)
    finally:
        if bars:
            datasets.enable_progress_bars()
    with open(os.path.join(tmp, META_FILE), "w") as f:
        json.dump(params, f)
    try:
        os.rename(tmp, path)
    except OSError:
        # Another process finished the same build first: use theirs.
        shutil.rmtree(tmp, ignore_errors=True)
    return datasets.load_from_disk(path)


# --- serving ------------------------------------------------------------------


class _DeltaDataset(Dataset):
    """What the two views share: episode bounds, delta queries, the item.

    Args:
        hf_dataset: the ``datasets.Dataset`` from :func:`build_dataset`
            (rows in episode order).
        delta_timestamps: numeric column -> offsets in seconds, as LeRobot's
            ``delta_timestamps`` (default: the next ``CHUNK`` actions).
        fps: frames per second of the dataset, to turn offsets into rows.
    """

    def __init__(
        self,
        hf_dataset,
        delta_timestamps: Optional[Mapping[str, Sequence[float]]] = None,
        fps: float = FPS,
    ):
        if delta_timestamps is None:
            delta_timestamps = DEFAULT_DELTA_TIMESTAMPS
        for key in delta_timestamps:
            if key in CAMERAS or key not in hf_dataset.column_names:
                raise ValueError(
                    f"delta_timestamps: {key!r} is not a numeric column of "
                    f"the dataset ({', '.join(hf_dataset.column_names)})"
                )
        self.hf_dataset = hf_dataset
        self.fps = fps
        # Offsets in rows (int64, shape (len(offsets),)), per column.
        self.delta_indices = {
            key: np.array([round(dt * fps) for dt in offsets], dtype=np.int64)
            for key, offsets in delta_timestamps.items()
        }
        # Per row: the first row of its episode and one past its last.
        episode = np.asarray(
            hf_dataset.with_format("numpy", columns=["episode_index"])["episode_index"]
        )
        start = np.r_[True, episode[1:] != episode[:-1]]
        run = np.cumsum(start) - 1
        firsts = np.flatnonzero(start)
        ends = np.r_[firsts[1:], len(episode)]
        self._from = firsts[run]
        self._to = ends[run]

    def __len__(self) -> int:
        return len(self.hf_dataset)

    def _query(self, idx: int) -> dict:
        """column -> (rows, is_pad): the rows ``idx + offset`` clamped to
        the episode of ``idx`` (int64) and which of them were clamped
        (bool), both of shape (len(offsets),)."""
        out = {}
        lo, hi = self._from[idx], self._to[idx]
        for key, offsets in self.delta_indices.items():
            wanted = idx + offsets
            out[key] = (np.clip(wanted, lo, hi - 1), (wanted < lo) | (wanted >= hi))
        return out

    def _delta_values(self, key: str, rows: np.ndarray) -> torch.Tensor:
        """Column ``key`` at ``rows``: float32 (len(rows), state_dim)."""
        raise NotImplementedError

    def __getitem__(self, idx: int) -> dict:
        idx = int(idx)
        row = self.hf_dataset[idx]  # the current frame, cameras included
        item = {}
        for key, value in row.items():
            if key in CAMERAS:
                # PIL (H, W, 3) -> contiguous uint8 (3, H, W): a strided
                # tensor would make the batch collation several times slower.
                chw = np.ascontiguousarray(np.asarray(value).transpose(2, 0, 1))
                item[key] = torch.from_numpy(chw)
            else:
                item[key] = torch.tensor(value)
        for key, (rows, pad) in self._query(idx).items():
            item[key] = self._delta_values(key, rows)
            item[f"{key}_is_pad"] = torch.from_numpy(pad)
        return item


class HistoricalDeltaDataset(_DeltaDataset):
    """LeRobot-style samples with ``delta_timestamps``, read the slow way.

    ``item = ds[i]`` is a dict of tensors: each camera of frame ``i`` as
    uint8 (3, H, W); ``observation.state`` float32 (state_dim,);
    ``episode_index``, ``frame_index`` int64 and ``timestamp`` float32
    scalars; and for each column of ``delta_timestamps`` (default: the next
    50 ``action`` frames, 1 s at 50 fps) that column at frames
    ``i + offset``, clamped to the episode, as float32 (len(offsets),
    state_dim), with ``{column}_is_pad`` bool (len(offsets),) marking the
    clamped offsets.

    The regression: each offset is read as a whole row,
    ``hf_dataset[j][column]``.  Reading a row decodes every column, so each
    of the 50 offsets decodes both camera JPEGs only to keep a vector of 14
    floats: 51 rows and 102 image decodes per sample where 1 row and 2
    decodes would do.  Nothing is wrong with any single read; the cost is
    in the loop, and it lands on the DataLoader workers.
    """

    def _delta_values(self, key: str, rows: np.ndarray) -> torch.Tensor:
        return torch.stack(
            [torch.tensor(self.hf_dataset[int(j)][key]) for j in rows]
        )


class FixedDeltaDataset(_DeltaDataset):
    """The same items as :class:`HistoricalDeltaDataset`, read the fast way.

    The fix: take the numeric column first, then index it.  Each column of
    ``delta_timestamps`` gets a one-column, NumPy-formatted view of the
    Arrow table, and one indexed read ``view[rows][column]`` returns the
    float32 (len(offsets), state_dim) block without touching the image
    columns.  Only the current frame's row (and its two images) is decoded.
    """

    def __init__(self, hf_dataset, delta_timestamps=None, fps: float = FPS):
        super().__init__(hf_dataset, delta_timestamps, fps)
        self._columns = {
            key: hf_dataset.select_columns([key]).with_format("numpy")
            for key in self.delta_indices
        }

    def _delta_values(self, key: str, rows: np.ndarray) -> torch.Tensor:
        return torch.from_numpy(self._columns[key][rows][key])
