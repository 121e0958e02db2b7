"""A request the worker refuses (bad fields): the protocol answers it with EBADREQ."""


class BadRequest(Exception):
    pass
