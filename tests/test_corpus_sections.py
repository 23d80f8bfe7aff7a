"""A corpus section holds only what its student wrote differently (classroom.completed_cell): the
model solution's other definitions in that cell stay, so no student carries a copy of them."""
import ast
from collections import defaultdict

from autograder.layout import find_assignments
from classroom import CORPUS, REPO, SECTION, completed_cell, defined_names, load_corpus, reference_code

REFERENCE = '''import math


class Cache:
    """the model's cache"""
    def update(self, k):
        return k


@staticmethod
def helper(x):
    return x + 1


class Attention:
    def forward(self, x):
        return helper(x)
'''


def names(source: str) -> list[str]:
    return [name for statement in ast.parse(source).body for name in sorted(defined_names(statement))]


def test_a_section_that_defines_one_name_keeps_the_others_in_place():
    section = "class Cache:\n    def update(self, k):\n        return None\n"
    cell = completed_cell(REFERENCE, section)
    assert names(cell) == ["Cache", "helper", "Attention"]
    assert "return None" in cell and '"""the model\'s cache"""' not in cell
    assert "import math" in cell and "@staticmethod" in cell


def test_a_section_replaces_a_decorated_definition_with_its_decorator():
    cell = completed_cell(REFERENCE, "def helper(x):\n    return x - 1\n")
    assert "@staticmethod" not in cell and "return x - 1" in cell
    assert names(cell) == ["Cache", "helper", "Attention"]


def test_a_section_that_defines_everything_or_nothing_known_or_does_not_parse_is_the_whole_cell():
    everything = "class Attention:\n    pass\n\n\nclass Cache:\n    pass\n\n\nhelper = len\n"
    assert completed_cell(REFERENCE, everything) == everything
    nothing_known = "def mine(x):\n    return x\n"
    assert completed_cell(REFERENCE, nothing_known) == nothing_known
    broken = "class Cache:\n  def update(self, k):\n        return k\n    pass\n"
    assert completed_cell(REFERENCE, broken) == broken


def test_every_corpus_cell_defines_what_the_model_solution_cell_defines():
    """Completed, each student's cell binds every name its model solution's cell binds (a
    student who drops one would be graded on a NameError nobody meant)."""
    for assignment in find_assignments(REPO / "solutions"):
        reference = reference_code(assignment)
        for entry in load_corpus(assignment, cli=True):
            for grade_id, source in entry.cells.items():
                if grade_id not in reference:
                    continue  # a written answer
                try:
                    ours = set(names(source))
                except SyntaxError:
                    continue  # a student whose cell does not run, on purpose
                assert set(names(reference[grade_id])) <= ours, (assignment, entry.name, grade_id)


def test_no_two_students_carry_the_same_copy_of_a_model_definition():
    """Where the model solution's cell defines several names, a definition that two corpus files
    repeat to the letter (as parsed) is a copy, which the section should leave out."""
    seen = defaultdict(list)
    for folder in sorted(p for p in CORPUS.iterdir() if p.is_dir()):
        reference = reference_code(folder.name)
        for path in sorted(folder.glob("*.py")):
            text = path.read_text()
            heads = list(SECTION.finditer(text))
            for head, after in zip(heads, heads[1:] + [None]):
                grade_id = head.group(1)
                if grade_id not in reference or len(names(reference[grade_id])) < 2:
                    continue
                try:
                    body = ast.parse(text[head.end():after.start() if after else len(text)]).body
                except SyntaxError:
                    continue
                for statement in body:
                    if defined_names(statement) & set(names(reference[grade_id])):
                        seen[(folder.name, grade_id, ast.dump(statement))].append(path.name)
    copies = {key[:2]: files for key, files in seen.items() if len(files) > 1}
    assert not copies, copies
