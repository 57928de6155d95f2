"""Code that runs next to the student's code: in the student's kernel while grading, or in
this process when the grader runs trusted notebooks (the solution, the mutants)."""
