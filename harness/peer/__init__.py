"""The peer's recorded-run format (mcp-data-platform's bench results), read in one place.

A recorded run is a results file (``manifest``, ``runs[]`` with their ``episodes[]``,
``metrics``) with a ``RESULTS.json.transcripts`` folder of per-episode transcripts, or a
merged k-pass file whose ``passes.txt`` lists each pass's results file.

- ``results``: typed reads of one peer JSON file and the results file's shape;
- ``layout``: where a run's files are (``passes.txt``, transcript folders per pass);
- ``transcript``: an episode's transcript as turns to replay or as session calls;
- ``recorded_run``: the index the recorded agent plays from;
- ``importer``: ``import-peer``, a results file as a sealed run;
- ``arms``: the tasks bench's arm folders, their family and exclusion labels;
- ``tasks_import``: ``import-peer`` of an arm (or a family of arms), one sealed run each;
  ``tasks_arm`` reads and checks an arm's files into event bodies, ``pkrun_arm`` the
  pkrun shape's;
- ``world``: a pkrun arm's ``fixture-world.json``, as the peer's fixture service serves it.
"""
