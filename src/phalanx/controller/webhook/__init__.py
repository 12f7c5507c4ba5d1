"""The training operator's admission webhooks, served by `phalanx operator`:
AdmissionReview handling (review), certificates (certs, rotator), the HTTPS server (server).
"""
