"""The service's web side, by concern, each an APIRouter that ``app.create_app`` includes:

- ``session``: the login page, logging in and out;
- ``student``: the student's pages (their submissions, the upload form, a submission, its feedback page);
- ``api``: the notebook's JSON API (``attention_checks.submit``);
- ``instructor``: the instructor's pages (the class table, a student's history, the exports, the class report);
- ``health``: ``/health``, for the monitoring;

and what they share: ``guards`` (who is asking, and the checks a route needs, as FastAPI
dependencies), ``pages`` (templates and static files), ``errors`` (how a refusal or failure is
answered), ``middleware`` (the upload's size, the security headers).
"""
