"""The instructor's side: LMS downloads and grade sheets, the gradebook, the student distribution, code similarity."""
