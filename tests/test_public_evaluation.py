"""Evaluation metadata of the public benchmarks: official test splits and the Cholec80 overlap exclusions."""

from public_converters.evaluation import cholec80_overlap, official_test_videos, write_evaluation_metadata
from recipes.evaluation.public.metrics import read_video_list


def test_official_test_splits():
    assert official_test_videos("cholec80") == [f"video{n}" for n in range(41, 81)]
    assert official_test_videos("heichole") == sorted(f"Hei-Chole{n}" for n in range(25, 34))
    assert official_test_videos("endoscapes") == sorted(str(n) for n in range(162, 202))


def test_cholec80_exclusions_are_the_17_test_videos_cholect50_trains_on():
    overlap = cholec80_overlap()
    assert len(overlap) == 17  # the Sureon paper's count
    assert overlap[:3] == ["video43", "video47", "video48"] and "video80" not in overlap  # VID80 is a CholecT50 test
    assert all(41 <= int(video.removeprefix("video")) <= 80 for video in overlap)


def test_written_lists_load_with_the_report_reader(tmp_path):
    written = write_evaluation_metadata(tmp_path)
    assert read_video_list(tmp_path / "cholec80_excluded_videos.txt") == written["cholec80_excluded_videos"]
