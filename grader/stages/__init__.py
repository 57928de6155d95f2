"""The autograding pipeline, one submission at a time, as small named stages:

  collect   find the submissions in an LMS download (lms_names.py reads its file names),
            nbgrader's submitted/ or exchange folder, or a folder of notebooks; latest attempt
  identify  map each to a roster student; strangers and missing students reported
  sanitize  nbgrader's own preprocessors: clear outputs, de-duplicate ids, restore locked and
            test cells from the source, re-add deleted ones, validate metadata
  execute   run the notebook in its own kernel and working copy; test cells only *record*
  judge     in this trusted process: compare the records with the solution's trace (plus
            static.py: calls the assignment forbids, found in the source)
  score     write the verdicts into the notebook and nbgrader's gradebook (a temporary one)
  merge     copy the result into the course gradebook and autograded/ (the single writer)
  late      the submission time and nbgrader's late-submission penalty, after the merge
"""
