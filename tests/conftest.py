import sys
from pathlib import Path

# Lets tests import the shared helpers in this folder (classroom.py).
sys.path.insert(0, str(Path(__file__).resolve().parent))
