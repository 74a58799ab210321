"""Frame sampling: how many frames, which ones, their timestamps, seeking, and the resumable cache."""

import io
import itertools

import pytest
from PIL import Image

from builders.sureon import frames as frames_module
from builders.sureon.frames import (
    WINDOW_TOLERANCE_S,
    ClipError,
    FrameCache,
    FramePolicy,
    extract_all,
    extract_video_clips,
    index_videos,
    open_decoder,
    plan_frame_indices,
    sample_clip,
    windows_outside,
)
from sample_data.make_videos import read_frame_index, write_video


POLICY = FramePolicy()


@pytest.mark.parametrize(
    ("start", "end", "fps", "total", "count", "distinct"),
    [
        (10.0, 70.0, 25, 2250, 8, 8),  # long clip: 8 frames
        (10.0, 10.2, 25, 2250, 6, 6),  # 6 frames in the window: all of them
        (10.0, 10.04, 25, 2250, 4, 2),  # 2 frames in the window: clamped up to 4 (repeats)
        (10.01, 10.02, 25, 2250, 4, 1),  # shorter than a frame interval: the frame on screen, 4 times
        (80.0, 90.3, 25, 2250, 8, 8),  # ends within the tolerance past a 90 s video: up to its last frame
    ],
)
def test_frame_count_is_between_4_and_8(start, end, fps, total, count, distinct):
    indices = plan_frame_indices(start, end, fps, total, POLICY)
    assert len(indices) == count and len(set(indices)) == distinct
    assert indices == sorted(indices) and all(0 <= i < total for i in indices)
    if end - start >= 1 / fps:
        assert all(start <= i / fps <= end for i in indices)


def test_sampling_is_uniform_over_the_window():
    indices = plan_frame_indices(0.0, 7.96, 25, 2250, POLICY)  # frames 0..199: 8 parts of 25
    assert indices == [12, 37, 62, 87, 112, 137, 162, 187]
    gaps = {b - a for a, b in itertools.pairwise(indices)}
    assert gaps == {25}


def test_window_after_the_video_is_an_error():
    with pytest.raises(ClipError, match="after the video ends"):
        plan_frame_indices(95.0, 99.0, 25, 2250, POLICY)


def test_window_running_past_the_video_is_an_error():
    with pytest.raises(ClipError, match=r"\[80.00s, 95.00s\] runs past the end of this copy of the video \(90.00s\)"):
        plan_frame_indices(80.0, 95.0, 25, 2250, POLICY)


@pytest.mark.parametrize("window", [(float("nan"), 5.0), (-1.0, 5.0), (1.0, float("inf")), (6.0, 5.0)])
def test_a_window_that_is_no_span_of_seconds_is_an_error(window):
    with pytest.raises(ClipError, match="not a span of finite, non-negative seconds"):
        plan_frame_indices(*window, 25, 2250, POLICY)


def test_windows_outside_a_shorter_copy_are_found_from_its_header(tmp_path):
    short = tmp_path / "aB3_dE-5fGh.mp4"
    write_video(short, seconds=20, fps=25)  # a 20 s copy of a 90 s source (a re-upload, a cut download)
    windows = [(5.0, 60.0), (1.0, 88.0), (2.0, 19.9), (10.0, 20.0 + WINDOW_TOLERANCE_S)]
    outside = windows_outside(short, windows)
    assert set(outside) == {(5.0, 60.0), (1.0, 88.0)}  # within the tolerance past the end is kept
    assert "[5.00s, 60.00s] runs past the end of this copy of the video (20.00s)" in outside[(5.0, 60.0)]
    (tmp_path / "broken.mp4").write_bytes(b"\x00" * 256)
    assert all(
        "unreadable video broken.mp4" in why for why in windows_outside(tmp_path / "broken.mp4", windows).values()
    )


def test_policy_validation():
    with pytest.raises(ValueError, match="min_frames"):
        FramePolicy(max_frames=2, min_frames=4)


@pytest.mark.parametrize(
    ("source_id", "window"), [("aB3_dE-5fGh", (61.3, 68.9)), ("9f1e2d3c4b5a69788796a5b4c3d2e1f0", (3.0, 85.0))]
)
def test_sampled_frames_are_the_planned_ones_with_their_own_timestamps(sample_videos, fps_of, source_id, window):
    fps = fps_of[source_id]
    decoder = open_decoder(sample_videos / f"{source_id}.mp4")
    clip = sample_clip(decoder, *window, POLICY)
    assert len(clip.jpegs) == len(clip.timestamps) == 8
    painted = [read_frame_index(Image.open(io.BytesIO(jpeg))) for jpeg in clip.jpegs]
    assert painted == clip.indices == plan_frame_indices(*window, fps, decoder.metadata.num_frames, POLICY)
    assert clip.timestamps == pytest.approx([i / fps for i in clip.indices])
    assert all(window[0] <= t <= window[1] for t in clip.timestamps)


def test_frames_are_resized_to_the_longest_side(sample_videos):
    policy = FramePolicy(max_side=96)
    clip = sample_clip(open_decoder(sample_videos / "Vq2-Lm7Np0s.mp4"), 2.0, 8.0, policy)
    sizes = {Image.open(io.BytesIO(j)).size for j in clip.jpegs}
    assert sizes == {(96, 54)}
    assert [read_frame_index(Image.open(io.BytesIO(j))) for j in clip.jpegs] == clip.indices


def test_cache_resumes_without_decoding_again(sample_videos, tmp_path, monkeypatch):
    video = sample_videos / "Tt4Kk9Jj2Hh.mp4"
    windows = [(2.5, 10.5), (12.0, 19.0), (1.0, 88.0)]
    assert extract_video_clips(video, windows, POLICY, tmp_path) == {w: None for w in windows}
    cache = FrameCache(tmp_path)
    first = {w: cache.get(cache.key(video, *w, POLICY)) for w in windows}

    def no_decoding(path):
        raise AssertionError("a cached clip was decoded again")

    monkeypatch.setattr(frames_module, "open_decoder", no_decoding)
    assert extract_video_clips(video, windows, POLICY, tmp_path) == {w: None for w in windows}

    # a clip file cut short by a crash is recomputed, the others are kept
    broken = cache._path(cache.key(video, *windows[0], POLICY))
    broken.write_bytes(broken.read_bytes()[:-10])
    assert cache.get(cache.key(video, *windows[0], POLICY)) is None
    assert not cache.has(cache.key(video, *windows[0], POLICY)) and cache.has(cache.key(video, *windows[1], POLICY))
    monkeypatch.setattr(frames_module, "open_decoder", open_decoder)
    extract_video_clips(video, windows, POLICY, tmp_path)
    assert cache.get(cache.key(video, *windows[0], POLICY)).jpegs == first[windows[0]].jpegs

    # another policy is another cache entry
    assert cache.key(video, *windows[0], FramePolicy(max_side=64)) != cache.key(video, *windows[0], POLICY)


def test_unreadable_video_and_bad_window_are_reported_per_clip(tmp_path, sample_videos):
    bad = tmp_path / "XXXXXXXXXXX.mp4"
    bad.write_bytes(b"\x00not a video" * 100)
    outcome = extract_video_clips(bad, [(1.0, 2.0)], POLICY, tmp_path / "cache")
    assert outcome[(1.0, 2.0)].startswith("unreadable video XXXXXXXXXXX.mp4")
    outcome = extract_video_clips(sample_videos / "Vq2-Lm7Np0s.mp4", [(1.0, 2.0), (95.0, 99.0)], POLICY, tmp_path)
    assert outcome[(1.0, 2.0)] is None and "after the video ends" in outcome[(95.0, 99.0)]


def test_index_videos(tmp_path):
    (tmp_path / "a" / "b").mkdir(parents=True)
    for rel in ("aB3_dE-5fGh.mp4", "a/b/0c0368222999f0438acd67df0e414a9f.MKV", "notes.txt", "a/.hidden.mp4"):
        (tmp_path / rel).write_bytes(b"x")
    assert sorted(index_videos(tmp_path)) == ["0c0368222999f0438acd67df0e414a9f", "aB3_dE-5fGh"]
    (tmp_path / "a" / "aB3_dE-5fGh.webm").write_bytes(b"x")
    with pytest.raises(ValueError, match="several files for the same source_id"):
        index_videos(tmp_path)
    with pytest.raises(FileNotFoundError):
        index_videos(tmp_path / "missing")


def test_parallel_extraction_matches_sequential(sample_videos, tmp_path):
    jobs = {
        sample_videos / "Vq2-Lm7Np0s.mp4": [(2.0, 8.0), (1.0, 88.0)],
        sample_videos / "9f1e2d3c4b5a69788796a5b4c3d2e1f0.mp4": [(6.0, 13.0), (95.0, 99.0)],
    }
    sequential = dict(extract_all(jobs, POLICY, tmp_path / "seq", num_workers=1))
    parallel = dict(extract_all(jobs, POLICY, tmp_path / "par", num_workers=2))
    assert parallel == sequential
    assert "after the video ends" in sequential[sample_videos / "9f1e2d3c4b5a69788796a5b4c3d2e1f0.mp4"][(95.0, 99.0)]
    seq_cache, par_cache = FrameCache(tmp_path / "seq"), FrameCache(tmp_path / "par")
    for video, windows in jobs.items():
        for window in windows[:1]:
            key = seq_cache.key(video, *window, POLICY)
            assert par_cache.get(key).jpegs == seq_cache.get(key).jpegs


class CountingDecoder:
    """Wraps a decoder and records every ``get_frames_at`` request, to see what one pass decodes."""

    def __init__(self, decoder):
        self.decoder, self.metadata, self.requests = decoder, decoder.metadata, []

    def get_frames_at(self, indices):
        self.requests.append(list(indices))
        return self.decoder.get_frames_at(indices)


def test_a_videos_clips_share_one_pass_in_time_order_with_the_same_frames_as_one_by_one(sample_videos):
    video = sample_videos / "Tt4Kk9Jj2Hh.mp4"
    # out of order, overlapping; the last two short ones take every frame they hold, so they share four
    windows = [(40.0, 47.5), (2.5, 10.5), (5.0, 12.0), (1.0, 88.0), (44.0, 44.12), (44.0, 44.2)]
    decoder = CountingDecoder(open_decoder(video))
    meta = decoder.metadata
    plans = {w: plan_frame_indices(*w, meta.average_fps, meta.num_frames, POLICY) for w in windows}
    shared = dict(frames_module.sample_clips(decoder, plans, POLICY))
    requested = [index for request in decoder.requests for index in request]
    assert requested == sorted({i for plan in plans.values() for i in plan})  # each frame once, in time order
    assert len(requested) < sum(len(set(plan)) for plan in plans.values())  # the overlaps were decoded once
    for window in windows:
        alone = sample_clip(open_decoder(video), *window, POLICY)
        assert shared[window] == alone
        assert [read_frame_index(Image.open(io.BytesIO(j))) for j in alone.jpegs] == plans[window]


def test_decoder_side_scaling_threads_and_devices(sample_videos, tmp_path):
    video = sample_videos / "Vq2-Lm7Np0s.mp4"
    windows = [(2.0, 8.0), (30.0, 80.0)]
    policy = FramePolicy(max_side=96)
    decoder = frames_module.open_clip_decoder(video, policy)
    assert tuple(decoder.get_frames_at([0]).data.shape[-2:]) == (54, 96)  # FFmpeg scales while converting to RGB
    caches = {}
    for threads in (1, 2):
        assert extract_video_clips(video, windows, policy, tmp_path / str(threads), num_threads=threads) == {
            w: None for w in windows
        }
        cache = FrameCache(tmp_path / str(threads))
        caches[threads] = [cache.get(cache.key(video, *w, policy)) for w in windows]
    assert caches[1] == caches[2]  # threads never change a byte
    for clip in caches[1]:
        images = [Image.open(io.BytesIO(j)) for j in clip.jpegs]
        assert {image.size for image in images} == {(96, 54)}
        assert [read_frame_index(image) for image in images] == clip.indices
    # a frame that arrives at full size (the GPU path) is scaled by encode_jpeg to the same size
    full = open_decoder(video).get_frames_at([clip.indices[0]]).data[0]
    assert Image.open(io.BytesIO(frames_module.encode_jpeg(full, policy)[0])).size == (96, 54)
    cache = FrameCache(tmp_path)
    assert cache.key(video, *windows[0], policy, "cuda") != cache.key(video, *windows[0], policy)
    assert frames_module.resolve_decode_device("cpu") == "cpu"
    with pytest.raises(ValueError, match="decode device"):
        frames_module.resolve_decode_device("tpu")


@pytest.mark.gpu
def test_cuda_decoding_samples_the_planned_frames(sample_videos, tmp_path):
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA GPU")
    video = sample_videos / "Vq2-Lm7Np0s.mp4"
    windows = [(2.0, 8.0), (30.0, 80.0)]
    assert frames_module.resolve_decode_device("auto") == "cuda"
    outcome = extract_video_clips(video, windows, POLICY, tmp_path, device="cuda")
    assert outcome == {w: None for w in windows}, outcome
    cache = FrameCache(tmp_path)
    for window in windows:
        clip = cache.get(cache.key(video, *window, POLICY, "cuda"))
        assert [read_frame_index(Image.open(io.BytesIO(j))) for j in clip.jpegs] == clip.indices
