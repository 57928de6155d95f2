"""The autograding pipeline's stages, one module each, in the order grader/pipeline.py runs them:

  collect   find the submissions in an LMS download (grader/lms/ reads its file names),
            nbgrader's submitted/ or exchange folder, or a folder of notebooks; latest attempt
  identify  map each to a roster student; strangers and missing students reported
  sanitize  read it; nbgrader's own preprocessors: clear outputs, de-duplicate ids, restore the
            grading metadata and source of locked and test cells, re-add deleted ones
  execute   run the notebook in its own kernel and working copy; test cells only *record*
  judge     in this trusted process: compare the records with the solution's trace, and find
            calls the assignment forbids in the student's own code (grader/forbidden.py)
  repair    in a debugging lab only: a bug's tests pay for a repair of the colleague's code, not
            for a rewrite of it (grader/labs.py)
  score     write the verdicts into the notebook and its own (temporary) gradebook
  merge     copy the result into the course gradebook and autograded/ (the single writer)
  late      the submission time and nbgrader's late-submission penalty, after the merge
"""
