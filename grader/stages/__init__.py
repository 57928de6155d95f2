"""The autograding pipeline, one submission at a time, as small named stages:

  collect   find the submissions in a folder, nbgrader's submitted/ layout or an LMS zip
  sanitize  nbgrader's own preprocessors: clear outputs, de-duplicate ids, restore locked and
            test cells from the source, re-add deleted ones, validate metadata
  execute   run the notebook in its own kernel and working copy; test cells only *record*
  judge     in this trusted process: compare the records with the solution's trace
  score     write the verdicts into the notebook and nbgrader's gradebook (a temporary one)
  merge     copy the result into the course gradebook and autograded/ (the single writer)
"""
