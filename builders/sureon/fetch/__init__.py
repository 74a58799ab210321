"""``sureon videos fetch``: the source videos a Sureon release needs, into the folder ``sureon build sureon
--videos`` reads.

The release is annotation-only: its ``clip_id`` s name the source (an 11-character YouTube id, or a 32-hex id for
sources with no public URL, which the user supplies). Only the sources of the chosen configs are fetched, as
``<source_id>.<ext>``, each verified before it counts, and ``availability.json`` says what became of every one.

The parts: ``needs.py`` (the sources and clip windows a release asks for), ``fetcher.py`` (yt-dlp, the pool of
downloads, the archive that makes a run resumable), ``error_classes.py`` (what a yt-dlp error says of the video or of
the session), ``rate_limit.py`` (spacing downloads, and what a rate limit or bot check does to the rest),
``integrity.py`` (whether a file covers its clips), ``report.py`` (the summary and exit status) and ``command.py``.
"""
